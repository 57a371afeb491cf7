import math
import sys

radius = 2.0
area = math.pi * radius ** 2
side = math.sqrt(area)
sys.exit(0)
print("done")
