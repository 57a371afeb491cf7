"""Running one job in an isolated child process: isolation, cgroups, seccomp, the fork server.

Knows nothing of assignments; `child/` is the code that runs inside."""
