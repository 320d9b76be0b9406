// JSON Schema validation with ajv, independent of the SDK's own validator. MCP 2025-11-25 makes 2020-12 the
// default dialect of tool schemas; a schema that names draft-07 gets ajv's draft-07 class.

import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const MAX_ERRORS = 3;

function ajvFor(schema) {
  const draft7 = typeof schema?.$schema === "string" && schema.$schema.includes("draft-07");
  // strict off: servers may put annotations ajv does not know (e.g. pydantic's "discriminator" mapping).
  const ajv = draft7 ? new Ajv({ strict: false, allErrors: true }) : new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv;
}

/** A validate(value) -> null | "error text" function; throws when the schema itself does not compile. */
export function compileSchema(schema) {
  const ajv = ajvFor(schema);
  const validate = ajv.compile(schema);
  // The first few errors say what is wrong; allErrors over a long array repeats one mistake per item.
  return (value) => (validate(value) ? null : ajv.errorsText(validate.errors.slice(0, MAX_ERRORS), { separator: "; " }));
}
