"""From a submissions folder to Submission objects: discovery, notebooks, exercise regions."""
