// Candidate kernels built from the task's own signature, so they compile for whichever task the suite picked.

/** Writes nothing: outputs keep their poison (or declared initial value), so the comparison must fail. */
export function wrongKernel(signature) {
  return `${signature}\n{\n    // deliberately wrong: no output is written\n}\n`;
}

/** Never returns (a volatile flag the compiler cannot fold away): only a cancellation or timeout ends it. */
export function spinningKernel(signature) {
  return `${signature}\n{\n    volatile int spinning = 1;\n    while (spinning) { }\n}\n`;
}
