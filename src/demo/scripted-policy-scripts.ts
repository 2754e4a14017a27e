/**
 * Ready scripts for the scripted policy server, and helpers to read a conversation. They look at the
 * conversation (not the call index) so that they stay right when OpenCode retries a call or sends an
 * extra one.
 */
import type { ChatRequestBody, Script } from './scripted-policy-types.ts';

/** Number of tool results already in the conversation. */
export function toolResults(body: ChatRequestBody): number {
  return (body.messages ?? []).filter((m) => m.role === 'tool').length;
}

/** All text of the user messages (the prompt, the synthetic Read lines). */
export function userText(body: ChatRequestBody): string {
  const parts: string[] = [];
  for (const m of body.messages ?? []) {
    if (m.role !== 'user') continue;
    if (typeof m.content === 'string') parts.push(m.content);
    else if (Array.isArray(m.content)) {
      for (const p of m.content as Array<{ type?: string; text?: string }>) if (p.type === 'text' && p.text) parts.push(p.text);
    }
  }
  return parts.join('\n');
}

/** Whether a message after the last tool result carries an image part (how `read` returns an image). */
export function imageAfterLastToolResult(body: ChatRequestBody): boolean {
  const messages = body.messages ?? [];
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role === 'tool') last = i;
  });
  if (last < 0) return false;
  return messages.slice(last + 1).some(
    (m) => Array.isArray(m.content) && (m.content as Array<{ type?: string }>).some((p) => p.type === 'image_url'),
  );
}

/** The output of the last tool result, as text. */
export function lastToolOutput(body: ChatRequestBody): string {
  const tools = (body.messages ?? []).filter((m) => m.role === 'tool');
  const content = tools[tools.length - 1]?.content;
  return typeof content === 'string' ? content : JSON.stringify(content ?? '');
}

const PYTHON_SIZE =
  "import glob; from PIL import Image; p = sorted(glob.glob('puzzle.*'))[0]; im = Image.open(p); print('size', im.size[0], im.size[1], im.mode)";

export const scripts = {
  /** Answer at once with `text`. */
  answer(text: string): Script {
    return () => ({ kind: 'text', text });
  },
  /** Answer without ever using `\boxed{}`. */
  neverBox(): Script {
    return () => ({ kind: 'text', text: 'I looked at the picture, but I am not sure which option it is.' });
  },
  /** Run Python with Pillow on the puzzle image via bash, then answer `\boxed{answer}`. */
  pythonThenAnswer(answer: string): Script {
    return (body) =>
      toolResults(body) === 0
        ? { kind: 'tool_calls', text: 'Let me measure the image.', calls: [{ name: 'bash', arguments: { command: `python3 -c "${PYTHON_SIZE}"`, description: 'Print the image size' } }] }
        : { kind: 'text', text: `The tool printed: ${lastToolOutput(body).trim()}. So the answer is \\boxed{${answer}}.` };
  },
  /** `read` the puzzle image, note whether it came back as an image part, then answer. */
  readImageThenAnswer(answer: string, filePath = 'puzzle.png'): Script {
    return (body, _i, ctx) => {
      if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'read', arguments: { filePath } }] };
      ctx.note(imageAfterLastToolResult(body) ? 'image-after-read' : 'no-image-after-read');
      return { kind: 'text', text: `I have looked at it again. \\boxed{${answer}}` };
    };
  },
  /** Stop on the output cap: finish_reason `length` without an answer. */
  lengthCut(): Script {
    return () => ({ kind: 'text', text: 'Let me think about this step by step. First, the', finishReason: 'length' });
  },
  /** The context window is exceeded (HTTP 400 `context_length_exceeded`). */
  contextOverflow(): Script {
    return () => ({
      kind: 'error',
      status: 400,
      body: { error: { message: "This model's maximum context length is 1024 tokens. However, you requested 99999 tokens.", type: 'invalid_request_error', code: 'context_length_exceeded' } },
    });
  },
  /** Every call fails with `status`. */
  fail(status: number): Script {
    return () => ({ kind: 'error', status });
  },
  /** Every call hangs. */
  hang(): Script {
    return () => ({ kind: 'hang' });
  },
  /** Call bash forever (a model that never stops using tools). */
  toolLoop(): Script {
    return (body) => ({ kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: `echo step ${toolResults(body)}` } }] });
  },
  /**
   * Demo mode: answer each puzzle from a lookup table `{ questionSubstring: answer }` matched against
   * the user's text; with `useTool` (default) first run Python on the image once, like a real agent.
   */
  demo(table: Record<string, string>, opts: { fallback?: string; useTool?: boolean } = {}): Script {
    const entries = Object.entries(table);
    return scripts.agent({ answer: (body) => entries.find(([needle]) => userText(body).includes(needle))?.[1] ?? opts.fallback }, opts);
  },
  /**
   * The demo's agent (`vcfleet demo`, `vcfleet stand-in policy`): with `useTool` (default) first run
   * Python on the image once, its command ending in `# <tag>` when `tag` gives one (a decision the
   * answering call reads back from the conversation: `toolTag`), then answer `\boxed{answer(body)}`.
   */
  agent(decide: { answer(body: ChatRequestBody): string | undefined; tag?(body: ChatRequestBody): string }, opts: { useTool?: boolean } = {}): Script {
    return (body) => {
      if ((opts.useTool ?? true) && toolResults(body) === 0) {
        const tag = decide.tag?.(body);
        return { kind: 'tool_calls', text: 'I will check the image size first.', calls: [{ name: 'bash', arguments: { command: `python3 -c "${PYTHON_SIZE}"${tag ? ` # ${tag}` : ''}` } }] };
      }
      const answer = decide.answer(body);
      if (answer === undefined) return { kind: 'text', text: 'I do not know this puzzle.' };
      return { kind: 'text', text: `Looking at the picture carefully, the answer is \\boxed{${answer}}.` };
    };
  },
};

/** The tag `scripts.agent` wrote at the end of its bash command in this conversation (`# <tag>`), or null. */
export function toolTag(body: ChatRequestBody): string | null {
  for (const m of body.messages ?? []) {
    for (const call of m.role === 'assistant' ? (m.tool_calls ?? []) : []) {
      try {
        const command = (JSON.parse(call.function.arguments) as { command?: unknown }).command;
        const tag = typeof command === 'string' ? /" # ([\w.:-]+)$/.exec(command)?.[1] : undefined;
        if (tag) return tag;
      } catch {
        // not JSON: not the agent's call
      }
    }
  }
  return null;
}
