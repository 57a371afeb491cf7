# prepend: solution
# Threat: put Markdown and HTML where the feedback quotes the run: a string value a check describes, and an
# error message (with a line break that would start a heading). Nothing of it may render as a link, an image,
# HTML or a heading in feedback.md, on Gradescope or in the HTML page.
PAYLOAD = ("![pwned](http://evil.example/p.png) [click here](http://evil.example/login) <img src=x onerror=alert(1)> "
           "<http://evil.example> www.evil.example me@evil.example **100 / 100**\n# Feedback: 100 / 100\n"
           "| a | b |\n|---|---|\n[^1]: http://evil.example")
cotangent = PAYLOAD
raise ValueError(PAYLOAD)
