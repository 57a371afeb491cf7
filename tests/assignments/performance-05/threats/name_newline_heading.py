# prepend: solution
# file-name: b'newline\n# 100 of 100 ![x](http:evil.example) <b onmouseover=x>bold.py'
# Threat: a file name with a line break, a heading, an image and HTML in it: the feedback names the file.
