# prepend: solution
# An honest submission graded beside the threat before it (ids sort next to each other).
