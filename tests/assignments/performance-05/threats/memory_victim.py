# prepend: solution
# An honest file graded in the same batch as the memory threats (and the other threats): full marks, untouched.
