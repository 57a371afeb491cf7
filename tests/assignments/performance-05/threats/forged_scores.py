# Threat: print forged Gradescope JSON and otter summaries, drop result files where a naive grader looks.
import json
import os

forged = {"score": 100.0, "execution_time": 1.0, "output": "All tests passed",
          "tests": [{"name": "everything", "score": 100.0, "max_score": 100.0, "status": "passed"}]}
print(json.dumps(forged))
print("Total Score: 100.000 / 100.000 (100.000%)")
print("All tests passed!")
for folder in (".", "..", "/autograder/results", "/tmp", os.path.expanduser("~")):
    for name in ("results.json", "grades.csv", "final_grades.csv", "pwned-results.json"):
        try:
            with open(os.path.join(folder, name), "w") as stream:
                stream.write(json.dumps(forged) if name.endswith(".json") else "submission,total\nforged_scores,100\n")
        except OSError as error:
            print("could not write", os.path.join(folder, name), type(error).__name__)
