/**
 * The "models host" of test/faults/hosts.test.ts, run as its own process inside that host's network
 * namespace (`node --import tsx hosts-models.ts`): the scripted policy server and the scripted judge
 * server bound to the namespace's address. It prints one JSON line `{"policy": URL, "judge": URL}`
 * once both listen, and stops on SIGTERM.
 *
 * Environment: MODELS_HOST (the address to bind), MODELS_ANSWERS (JSON: a question prefix such as
 * "Puzzle 3:" -> the answer to box, or null to answer without a box), MODELS_SLEEP_S (how long the
 * model's one bash call sleeps before it measures the image, so a worker can be killed mid-tool).
 */
import { scripts, startScriptedPolicyServer, toolResults, userText, lastToolOutput, type Script } from '../helpers/scripted-policy-server.ts';
import { startScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';

const host = process.env.MODELS_HOST ?? '127.0.0.1';
const answers = JSON.parse(process.env.MODELS_ANSWERS ?? '{}') as Record<string, string | null>;
const sleepS = Number(process.env.MODELS_SLEEP_S ?? '4');
const measure = "import glob; from PIL import Image; im = Image.open(sorted(glob.glob('puzzle.*'))[0]); print('size', *im.size)";

/** One bash call (sleep, then Python on the image), then the scripted answer for the puzzle asked. */
const script: Script = (body) => {
  if (toolResults(body) === 0) {
    return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: `sleep ${sleepS} && python3 -c "${measure}"`, description: 'measure the image' } }] };
  }
  const text = userText(body);
  const key = Object.keys(answers).find((k) => text.includes(k));
  if (key === undefined) return scripts.neverBox()(body, 0, { note: () => {} });
  const answer = answers[key];
  const seen = lastToolOutput(body).trim().slice(0, 80);
  return { kind: 'text', text: answer === null ? `The tool printed ${seen}; I cannot tell.` : `The tool printed ${seen}. \\boxed{${answer}}` };
};

const policy = await startScriptedPolicyServer({ host, script });
const judge = await startScriptedJudgeServer({ host });
process.stdout.write(`${JSON.stringify({ policy: policy.url, judge: judge.url })}\n`);

process.once('SIGTERM', () => {
  void Promise.all([policy.close(), judge.close()]).then(() => process.exit(0));
});
