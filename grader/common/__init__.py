"""Small tools every stage uses: atomic files, the user cache folder, versions, Markdown escaping."""
