// One line per check, PASS or FAIL, and a summary; the suite exits non-zero when any check failed.

export class Report {
  constructor(out = process.stdout) {
    this.out = out;
    this.passed = 0;
    this.failed = [];
  }

  pass(name, detail = "") {
    this.passed += 1;
    this.line("PASS", name, detail);
  }

  fail(name, detail = "") {
    this.failed.push(name);
    this.line("FAIL", name, detail);
  }

  line(verdict, name, detail) {
    const oneLine = String(detail).replace(/\s*\n\s*/g, " ");
    this.out.write(`${verdict}  ${name}${oneLine ? ` — ${oneLine}` : ""}\n`);
  }

  /** PASS when `ok`, else FAIL; the detail is printed either way. */
  check(name, ok, detail = "") {
    (ok ? this.pass : this.fail).call(this, name, detail);
    return ok;
  }

  /** Runs `fn(); an exception is a FAIL of `name` (a check that could not run has not passed). */
  async step(name, fn) {
    try {
      return await fn();
    } catch (error) {
      this.fail(name, `threw: ${describe(error)}`);
      return undefined;
    }
  }

  note(text) {
    this.out.write(`      ${text}\n`);
  }

  summary() {
    const total = this.passed + this.failed.length;
    this.out.write(`\n${this.passed}/${total} checks passed`);
    this.out.write(this.failed.length ? `; failed: ${this.failed.join(", ")}\n` : "\n");
    return this.failed.length;
  }
}

export function describe(error) {
  if (error && typeof error === "object" && "code" in error && "message" in error) {
    return `[${error.code}] ${error.message}`;
  }
  return error instanceof Error ? error.message : String(error);
}
