#!/usr/bin/env node
// Drain the `vcfleet worker` of this container, then return: a Kubernetes preStop hook
// (deploy/helm/vcfleet), or by hand:
//   docker exec CONTAINER node bin/vcfleet-drain.js [--timeout S] [--pid PID]
// It sends SIGUSR2 to each `vcfleet worker` process it finds in /proc (the worker stops taking jobs,
// lets its running ones finish within its --drain-grace, hands back the rest, and exits), then waits
// until they have exited. Kubernetes sends SIGTERM only after this returns, and kills the pod at
// terminationGracePeriodSeconds whatever happens, so that must cover the drain.
// --pid PID drains that worker only (on a host that runs other processes than the container's).
// Exit 0: drained (or no worker was running); 1: a worker still ran after --timeout (default: none).
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const args = process.argv.slice(2);
let timeoutS = Infinity;
let onlyPid = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--timeout' && Number(args[i + 1]) > 0) timeoutS = Number(args[++i]);
  else if (args[i] === '--pid' && Number.isInteger(Number(args[i + 1]))) onlyPid = Number(args[++i]);
  else if (args[i] === '-h' || args[i] === '--help') {
    console.log('usage: node bin/vcfleet-drain.js [--timeout S] [--pid PID]  (drain the vcfleet workers of this container, then return)');
    process.exit(0);
  } else {
    console.error(`vcfleet-drain: unknown argument "${args[i]}": use --timeout S (seconds), --pid PID or nothing`);
    process.exit(2);
  }
}

/** The pids of the `vcfleet worker` processes (node bin/vcfleet.js worker ROLE) visible here. */
function workerPids() {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    const at = argv.findIndex((a) => a.endsWith('vcfleet.js'));
    if (at >= 0 && argv[at + 1] === 'worker' && /node$/.test(argv[0])) pids.push(Number(entry));
  }
  return pids;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const pids = workerPids().filter((pid) => onlyPid === null || pid === onlyPid);
if (pids.length === 0) {
  console.log('vcfleet-drain: no vcfleet worker runs here; nothing to drain');
  process.exit(0);
}
for (const pid of pids) process.kill(pid, 'SIGUSR2');
console.log(`vcfleet-drain: SIGUSR2 sent to worker pid ${pids.join(', ')}; waiting for it to finish its running jobs and exit`);
const deadline = Date.now() + timeoutS * 1000;
while (pids.some(alive)) {
  if (Date.now() > deadline) {
    console.error(`vcfleet-drain: worker pid ${pids.filter(alive).join(', ')} still runs after ${timeoutS} s`);
    process.exit(1);
  }
  await sleep(500);
}
console.log('vcfleet-drain: drained; the worker exited');
