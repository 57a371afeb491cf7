"""Reference solution of the tiny test assignment (a module docstring the starter leaves out)."""
import math

radius = 2.0

# BEGIN EXERCISE area
# The area first, then the side of the square with the same area.
area = math.pi * radius ** 2
side = math.sqrt(area)
assert math.isclose(side * side, area), "a square of side `side` has area `area`"
print("area", area, "side", round(side, 3))
# END EXERCISE area

print("done")
