/**
 * Every poll and retry pace in hyperloom, named once. They run on the Effect `Clock`, like every
 * wait in the code base, so `TestClock` drives them in tests.
 */
import { Duration, Schedule } from "effect"

/**
 * A lease or group that waits for a busy slot first looks at who holds it after this long (a
 * lease granted at once says nothing)…
 */
export const contentionFirstLook: Duration.Duration = Duration.seconds(1)

/** …then looks again at this pace, and says so whenever the holder changes. */
export const contentionPoll = Schedule.spaced(Duration.seconds(2))

/**
 * How many looks in a row must find nobody visibly holding what a lease or group waits for before
 * it says it is not granted yet (at 1 s, 3 s, 5 s: 5 s). Before that, Ray is likely only starting
 * its worker or taking back what a holder just killed held, and "waiting" would be wrong.
 */
export const contentionQuietLooks = 3

/** After `ray start`, how often the GCS is asked whether the head shows serving_slot yet. */
export const headReadyPoll = Schedule.spaced(Duration.millis(100))

/** How a waiter retries a lock another process holds (jittered: waiters do not retry in step). */
export const lockRetry = Schedule.spaced(Duration.millis(100)).pipe(Schedule.jittered)

/**
 * A lease in the host's queue (docs/design.md#fair-queue) looks at the queue at this pace until it
 * is its turn to submit its actor (a dead waiter or holder is seen at the next look: the kernel
 * freed its lock).
 */
export const queuePoll = Schedule.spaced(Duration.millis(200))

/**
 * How long a waiter of another user may be the head of the host's queue (as a waiter behind it
 * sees it) without Ray showing an actor of its lease, before the waiters behind it pass it over
 * (a foreign user who joins and never asks Ray must not hold the line). A real lease's head
 * submits within seconds of its turn: its bridge imports Ray and the cluster is checked first.
 */
export const foreignHeadGrace = Duration.seconds(20)

/** A waiter behind a foreign head asks Ray about it at most this often. */
export const foreignHeadLook = Duration.seconds(1)
