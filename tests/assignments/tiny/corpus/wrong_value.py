import math

radius = 2.0
area = math.pi * radius  # the circumference over two, not the area
side = math.sqrt(area)
