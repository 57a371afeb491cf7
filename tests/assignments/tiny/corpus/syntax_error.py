import math

radius = 2.0
area = math.pi * radius ** 2
side = math.sqrt(area
