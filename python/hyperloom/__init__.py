"""hyperloom's Python side: what a Ray driver must do for hyperloom (TypeScript), which starts
it with the Python of the Ray installation as `python PYDIR COMMAND` (PYDIR: the folder holding
this package and its __main__.py). One job per module:

    procgroup    process groups from /proc: members, descendants, start times, TERM-grace-KILL
    cgroup       a cgroup v2 of the lease's own, stopped with cgroup.kill
    keeper       the forked child that KILLs a group the moment its parent (or an owner) ends
    supervisor   runs one lease's command in a group it leads; `python -I PYDIR supervise`
    gone         what is left of a lease on its host, by the lease's token, and ending it
    gpus         who holds a lease's GPUs: the clean-GPU gate before CMD, the reclaim wait after
    actor        the lease actor (Ray): holds the resources, runs the supervisor, streams events
    shipping     what travels with a lease: the package by value, the supervisor's and runners' files
    leasename    a lease's names in Ray: its token, its placement group's name, its actor's name
    deadlease    the end of what a lease left on its nodes; the sweep of dead bridges' leases
    endpoint     the JSON-lines plumbing both bridges share
    bridge       one lease (`python PYDIR bridge`)
    group        one serving group, a rank actor per node (`python PYDIR group`)
    fence        the heartbeat fence: an actor cut off from its bridge stops its command before Ray
                 can declare its node dead (both bridges)
    engine       the serving engine's life on the leased node: start, alive, ready, stop (both runners)
    ready        after readiness, before measuring: the user's --check and the --warmup requests
    serve        the serving runner, a serving attempt's leased command (`python PYDIR serve`)
    sweep        the sweep runner, one server combination's leased command (`python PYDIR sweep`)
    clientrun    the runners' one client run: the port check, its group, timeout, samplers
    sampler      what the node sees of a run for the validity checks: the engine's effective
                 configuration, the client's CPU, the engine's /metrics, the GPUs (vendor tool)
    tee          the runners' one copy of a client's output to theirs and to client.log
    jsonfile     the serving runner's atomic write of its status document (serve.json)
    listener     who listens on the engine's port: the runners' check that it is the engine's own
    tidy         ends what a dead bridge's lease left, then frees its resources (`python PYDIR tidy`)

procgroup, keeper and supervisor are standard library only; the bridges import Ray. The package
is pickled by value with the actor class (shipping.register_by_value), so a Ray node that runs a
lease's actor needs only Ray, never these files.

The actor, the supervisor and the keeper
----------------------------------------
The actor (class HyperloomLease, num_cpus=0, num_gpus=N, resources={"serving_slot": 1} unless
disabled, drawn from a detached placement group of one bundle that its bridge owns, threaded so
`stop` runs beside `run`) starts CMD through a tiny supervisor: a Python
process (`python -I PYDIR supervise ...`, hyperloom.supervisor) that leads its
own session/process group; CMD and everything it starts live in that group. CMD's environment is
the caller's `env` with the actor's own device variables (CUDA_VISIBLE_DEVICES,
HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, set by Ray for the actor's GPUs) laid over it: they win.
The supervisor reports to the actor on a private pipe: "pid N" (or "failed") then "exit N"; it
reports the exit only once CMD's whole group is gone (leftovers: TERM, grace, KILL), because the
exit ends the lease. `run` is a streaming generator yielding lists of protocol events (batched
when lines come faster than they are consumed); `stop` sends TERM to the supervisor, which
forwards it to the group and escalates to KILL after the grace.

Invariant (docs/design.md#the-slot-means-the-gpus-are-free): once the lease's resources are released
in Ray, nothing of CMD's process group runs. Ray itself frees a dead worker's resources before
anything stopped CMD, and a dead driver's actors and job-owned placement groups at once; so the
resources are held by the lease's detached placement group, which is removed only after the end: by
the bridge once the supervisor reported the exit (it does so when nothing is left), else once
hyperloom.gone finds nothing of the lease on its node (by the lease's token: the supervisor's argv
and the lease's cgroup's name), by the bridge or, when the bridge died, by hyperloom's tidy
(hyperloom.tidy) or the next lease's bridge's sweep. Every
way the lease can end takes the group with it:

    hyperloom (the CLI) dies        the bridge sees EOF on stdin and releases normally (TERM,
                                    grace, KILL through the actor; the actor is killed after)
    the bridge (the driver) dies    the keeper, which watches the bridge's pid (a pidfd, when the
                                    actor runs on the bridge's host and pid namespace), SIGKILLs
                                    the group at once; Ray then kills the actor it owned (as
                                    below); the placement group stays until a tidy or a sweep
    the actor's worker dies         the raylet SIGKILLs the worker's direct children, i.e. the
    (SIGKILL, ray.kill, ray stop)   supervisor; the supervisor also gets PR_SET_PDEATHSIG
                                    (SIGUSR1, checked against its parent pid) and SIGKILLs the
                                    group at once, no grace; the bridge then ends what is left
    the supervisor dies (SIGKILL)   the keeper SIGKILLs the group at once; the actor ends what
                                    is left (hyperloom.gone) before it reports the exit
    CMD's parent dies               CMD itself has PR_SET_PDEATHSIG=SIGKILL toward the supervisor

The keeper is a child the supervisor forks before starting CMD (hyperloom.keeper). It shares the
supervisor's session and group, not CMD's (CMD leads a group of its own, inside the lease's cgroup
where the host allows one: hyperloom.cgroup; the supervisor is a child subreaper besides), ignores
every signal it can, holds none of the supervisor's descriptors except the read end of a private
pipe whose only writer is the supervisor, and SIGKILLs the lease's cgroup, CMD's group and the
descendants it was told of on EOF, i.e. the moment the supervisor ends however it ends, or the
moment the lease's owner (the bridge, `--owner-pid` with its start time against pid reuse) ends.
Ray does not kill it with the worker, since it is not the worker's direct child.
"""
