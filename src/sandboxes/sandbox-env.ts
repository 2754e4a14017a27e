/** Environment every provider gives sandboxed commands. */

/** Thread pools sized to one thread: libraries would otherwise size them from the host's CPUs. */
export const THREAD_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  ['OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMEXPR_NUM_THREADS', 'VECLIB_MAXIMUM_THREADS', 'OPENCV_FOR_THREADS_NUM'].map((k) => [k, '1']),
);
