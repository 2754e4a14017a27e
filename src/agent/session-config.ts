/**
 * OpenCode's configuration and environment for one session (see OPENCODE.md §0, §2): a custom
 * OpenAI-compatible provider pointing at the policy gateway, every start-up download turned off,
 * all state in the task's own folder.
 */

export const PROVIDER_ID = 'policy';
export const OPENCODE_VERSION = '1.17.11';

export interface SessionConfigInput {
  /** Base URL of the gateway as seen from inside the sandbox, ending in `/v1`. */
  gatewayBaseUrl: string;
  /** Per-task dummy key the gateway accepts; never the real policy key. */
  accessToken: string;
  modelName: string;
  contextWindow: number;
  maxOutputTokens: number;
  requestTimeoutS: number;
}

/** The JSON passed as OPENCODE_CONFIG_CONTENT. */
export function buildOpenCodeConfig(input: SessionConfigInput): Record<string, unknown> {
  return {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    model: `${PROVIDER_ID}/${input.modelName}`,
    small_model: `${PROVIDER_ID}/${input.modelName}`,
    enabled_providers: [PROVIDER_ID],
    provider: {
      [PROVIDER_ID]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Policy model (via the worker gateway)',
        options: {
          baseURL: input.gatewayBaseUrl,
          apiKey: input.accessToken,
          // Whole-request timeout: a hung policy server becomes an error event instead of a silent stall.
          timeout: input.requestTimeoutS * 1000,
        },
        models: {
          [input.modelName]: {
            name: input.modelName,
            attachment: true,
            tool_call: true,
            reasoning: false,
            temperature: true,
            modalities: { input: ['text', 'image'], output: ['text'] },
            limit: { context: input.contextWindow, output: input.maxOutputTokens },
          },
        },
      },
    },
    // `ask` would silently end a headless run; deny returns an error to the model and it goes on.
    // The reference's tools: bash, read, glob, grep, write, edit and todowrite (the instruction
    // prompt promises it); webfetch, sub-agents (task) and skills are not part of the harness.
    permission: { '*': 'allow', webfetch: 'deny', task: 'deny', skill: 'deny' },
    compaction: { auto: false, prune: false },
  };
}

export interface SessionPaths {
  /** The workspace (cwd of OpenCode, holds the puzzle image). */
  workdir: string;
  /** OpenCode's own state root for this task (XDG homes, DB). */
  stateDir: string;
}

export function sessionPaths(workdir: string): SessionPaths {
  // Inside the task folder but not named `.opencode` (that would trigger a plugin install there).
  return { workdir, stateDir: `${workdir.replace(/\/+$/, '')}/.agent-state` };
}

/** Files to create before the run so that OpenCode's background `npm install @opencode-ai/plugin` never starts. */
export function seedFiles(paths: SessionPaths): Array<{ path: string; content: string }> {
  const dir = `${paths.stateDir}/config/opencode`;
  const deps = { '@opencode-ai/plugin': OPENCODE_VERSION };
  return [
    { path: `${dir}/package.json`, content: JSON.stringify({ dependencies: deps }) + '\n' },
    { path: `${dir}/package-lock.json`, content: JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: deps } } }) + '\n' },
    { path: `${dir}/node_modules/.keep`, content: '' },
  ];
}

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The session's whole environment (nothing of the worker's own environment is passed). */
export function buildOpenCodeEnv(paths: SessionPaths, config: Record<string, unknown>, maxOutputTokens: number, runtimeHeapMib: number | null = null): Record<string, string> {
  const s = paths.stateDir;
  return {
    // The JavaScript runtime's heap budget (agent.runtime_heap_mib): bounds memory per session.
    ...(runtimeHeapMib === null ? {} : { BUN_JSC_forceRAMSize: String(runtimeHeapMib * 1024 * 1024) }),
    PATH: SANDBOX_PATH,
    HOME: `${s}/home`,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    TMPDIR: '/tmp',
    XDG_CONFIG_HOME: `${s}/config`,
    XDG_DATA_HOME: `${s}/data`,
    XDG_CACHE_HOME: `${s}/cache`,
    XDG_STATE_HOME: `${s}/state`,
    OPENCODE_DB: `${s}/data/opencode.db`,
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    OPENCODE_DISABLE_PROJECT_CONFIG: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_AUTOCOMPACT: '1',
    OPENCODE_DISABLE_PRUNE: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    OPENCODE_DISABLE_CLAUDE_CODE_PROMPT: '1',
    OPENCODE_DISABLE_CLAUDE_CODE_SKILLS: '1',
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
    OPENCODE_DISABLE_TERMINAL_TITLE: '1',
    OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX: String(maxOutputTokens),
  };
}

/** `opencode run` argv: the prompt goes on stdin (pitfalls 1-3), `--title` avoids the title call; one `-f` per image, in order. */
export function buildRunArgv(bin: string, modelName: string, title: string, imagePath: string, moreImagePaths: readonly string[] = []): string[] {
  return [bin, 'run', '--format', 'json', '-m', `${PROVIDER_ID}/${modelName}`, '--title', title, '-f', imagePath, ...moreImagePaths.flatMap((p) => ['-f', p])];
}
