"""Small standard headers served to NVRTC from memory, so no candidate ever needs a host include path."""

from __future__ import annotations

_INTS = [("int8_t", "signed char"), ("int16_t", "short"), ("int32_t", "int"), ("int64_t", "long long"),
         ("uint8_t", "unsigned char"), ("uint16_t", "unsigned short"), ("uint32_t", "unsigned int"),
         ("uint64_t", "unsigned long long"), ("intptr_t", "long long"), ("uintptr_t", "unsigned long long")]

_STDINT = "#pragma once\n" + "".join(f"typedef {c} {n};\n" for n, c in _INTS) + (
    "namespace std {" + "".join(f" using ::{n};" for n, _ in _INTS) + " }\n"
    "#define INT8_MIN (-128)\n#define INT8_MAX 127\n#define UINT8_MAX 255\n"
    "#define INT16_MIN (-32768)\n#define INT16_MAX 32767\n#define UINT16_MAX 65535\n"
    "#define INT32_MIN (-2147483647-1)\n#define INT32_MAX 2147483647\n#define UINT32_MAX 4294967295u\n"
    "#define INT64_MIN (-9223372036854775807ll-1)\n#define INT64_MAX 9223372036854775807ll\n"
    "#define UINT64_MAX 18446744073709551615ull\n"
)
_FLOAT = (
    "#pragma once\n#define FLT_MAX 3.402823466e+38f\n#define FLT_MIN 1.175494351e-38f\n"
    "#define FLT_EPSILON 1.192092896e-07f\n#define DBL_MAX 1.7976931348623158e+308\n"
    "#define DBL_MIN 2.2250738585072014e-308\n#define DBL_EPSILON 2.2204460492503131e-016\n"
)
_LIMITS = (
    "#pragma once\n#define CHAR_BIT 8\n#define SCHAR_MIN (-128)\n#define SCHAR_MAX 127\n#define UCHAR_MAX 255\n"
    "#define SHRT_MIN (-32768)\n#define SHRT_MAX 32767\n#define USHRT_MAX 65535\n"
    "#define INT_MIN (-2147483647-1)\n#define INT_MAX 2147483647\n#define UINT_MAX 4294967295u\n"
    "#define LLONG_MIN (-9223372036854775807ll-1)\n#define LLONG_MAX 9223372036854775807ll\n"
    "#define ULLONG_MAX 18446744073709551615ull\n"
)
_MATH = (
    "#pragma once\n#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
    "#ifndef NAN\n#define NAN __int_as_float(0x7fffffff)\n#endif\n"
    "#define M_PI 3.14159265358979323846\n#define M_E 2.7182818284590452354\n"
    "#define M_LN2 0.69314718055994530942\n#define M_SQRT2 1.41421356237309504880\n"
)
_STDDEF = "#pragma once\n"  # size_t and ptrdiff_t are NVRTC builtins

_EMPTY = "#pragma once\n"

HEADERS: dict[str, str] = {
    # NVRTC already provides what these declare; candidates written for nvcc include them anyway.
    **{name: _EMPTY for name in ("cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "device_launch_parameters.h",
                                 "device_functions.h", "math_functions.h", "cuda_device_runtime_api.h")},
    "stdint.h": _STDINT, "cstdint": _STDINT, "float.h": _FLOAT, "cfloat": _FLOAT,
    "limits.h": _LIMITS, "climits": _LIMITS, "math.h": _MATH, "cmath": _MATH,
    "stddef.h": _STDDEF, "cstddef": _STDDEF,
}
