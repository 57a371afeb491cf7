print('scratch work, not part of the submission')
