/**
 * Wait for `promise` at most `ms`: true when it settled (resolved or rejected) in time. For steps that
 * wait on Redis when Redis may be gone (a worker's ioredis queues commands for ever); the timer is
 * cleared as soon as the promise settles, so a prompt answer keeps no process alive.
 */
export function settleWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const done = () => {
      clearTimeout(timer);
      resolve(true);
    };
    promise.then(done, done);
  });
}
