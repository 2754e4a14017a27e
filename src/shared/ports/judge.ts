/** The contract of the grading stage. The real implementation calls an OpenAI-compatible judge. */
import type { RunSettings } from '../config/run-settings.ts';
import type { JudgeUsage, Verdict } from '../scoring/verdict.ts';


export interface JudgeInput {
  question: string;
  expectedAnswer: string;
  extractedAnswer: string | null;
  /** The model's text (or its end); the judge sees only its last RESPONSE_TAIL_CHARS characters. */
  responseText: string;
  /** `responseText` is already the end of a longer text (the outcome's `response_truncated`): the judge is told so. */
  responseTruncated?: boolean;
  /** The rollout being graded, for logs only (never part of the prompt or the cache key). */
  rolloutId?: string;
  /** The run's judge settings (run settings); default: the judge's own configuration. */
  run?: RunJudgeSettings;
}

/** The judge settings a run fixes (run settings, by their config keys): which model grades it, and how. */
export type RunJudgeSettings = Pick<RunSettings, 'visual_coding_opencode_judge_model_name' | 'judge'>;

/** What the judge was asked, exactly: its model and the messages it was sent (for the transcript). */
export interface JudgeAsked {
  model: string;
  prompt: { system: string; user: string };
}

export type JudgeResult = (
  | { status: 'scored'; verdict: Verdict; reason: string; reward: 0 | 1; cached: boolean }
  /**
   * The judge refused the grading input for what the rollout itself put in it, as it would every time
   * (its context length, a content filter): the rollout scores 0, never masked (the model cannot hide
   * a task it fails by making the judge refuse it).
   */
  | { status: 'refused'; reason: string }
  /**
   * Not a score: the call failed after its retries (`unavailable`), or the replies held no valid
   * verdict, twice (`no_verdict`). Masked, rejudgeable.
   */
  | { status: 'failed'; reason: string; kind?: 'no_verdict' | 'unavailable' }
) & {
  asked?: JudgeAsked;
  /** The judge model as its server reported it in its reply (`model`), or as it did for the cached verdict; absent when it did not say. */
  servedModel?: string;
  /** The tokens the judge's replies counted for this grading (0 and 0 for a cached verdict); absent when the judge does not say. */
  usage?: JudgeUsage;
};


export interface Judge {
  readonly modelName: string;
  /** Never throws for endpoint failures: they come back as `{ status: 'failed' }`. */
  grade(input: JudgeInput, signal?: AbortSignal): Promise<JudgeResult>;
  close(): Promise<void>;
}
