// The functions of expressions (eval(), `:=`, case conditions): name, arity, doc. Parsed by
// parser.cc into Expr::Kind::kCall with the canonical (lower-case) name; evaluated by
// transform.cc (EvalCall).
#include "query/functions/list.h"

namespace sediment::query::functions {

#define SEDIMENT_EXPR_FUNCTION(var, fname, lo, hi, camel_name, text) \
  const Function var = {                                             \
      .name = fname,                                                 \
      .kind = Kind::kExpression,                                     \
      .params = {},                                                  \
      .doc = text,                                                   \
      .min_args = lo,                                                \
      .max_args = hi,                                                \
      .camel = camel_name,                                           \
  };

SEDIMENT_EXPR_FUNCTION(kExprLower, "lower", 1, 1, nullptr, "text lower-cased")
SEDIMENT_EXPR_FUNCTION(kExprUpper, "upper", 1, 1, nullptr, "text upper-cased")
SEDIMENT_EXPR_FUNCTION(kExprLength, "length", 1, 1, nullptr, "the number of characters")
SEDIMENT_EXPR_FUNCTION(kExprConcat, "concat", 1, -1, nullptr, "the texts joined")
SEDIMENT_EXPR_FUNCTION(kExprSubstr, "substr", 2, 3, nullptr, "part of a text")
SEDIMENT_EXPR_FUNCTION(kExprTrim, "trim", 1, 1, nullptr, "text without surrounding space")
SEDIMENT_EXPR_FUNCTION(kExprRound, "round", 1, 1, nullptr, "the nearest integer")
SEDIMENT_EXPR_FUNCTION(kExprFloor, "floor", 1, 1, nullptr, "rounded down")
SEDIMENT_EXPR_FUNCTION(kExprCeil, "ceil", 1, 1, nullptr, "rounded up")
SEDIMENT_EXPR_FUNCTION(kExprAbs, "abs", 1, 1, nullptr, "the absolute value")
SEDIMENT_EXPR_FUNCTION(kExprMin, "min", 2, -1, nullptr, "the smallest of numbers")
SEDIMENT_EXPR_FUNCTION(kExprMax, "max", 2, -1, nullptr, "the largest of numbers")
SEDIMENT_EXPR_FUNCTION(kExprIf, "if", 3, 3, nullptr, "a value chosen by a condition")
SEDIMENT_EXPR_FUNCTION(kExprToString, "tostring", 1, 1, "toString", "a value as text")
SEDIMENT_EXPR_FUNCTION(kExprToNumber, "tonumber", 1, 1, "toNumber", "a text as a number")
SEDIMENT_EXPR_FUNCTION(kExprNow, "now", 0, 0, nullptr, "the current time in ms")
SEDIMENT_EXPR_FUNCTION(kExprFormatTime, "formattime", 2, 3, "formatTime", "a time formatted")
SEDIMENT_EXPR_FUNCTION(kExprDuration, "duration", 1, 1, nullptr, "a time span in milliseconds")
SEDIMENT_EXPR_FUNCTION(kExprStart, "start", 0, 0, nullptr,
                       "the start of the query's time range in ms")
SEDIMENT_EXPR_FUNCTION(kExprEnd, "end", 0, 0, nullptr, "the end of the query's time range in ms")
SEDIMENT_EXPR_FUNCTION(kExprFormatDuration, "formatduration", 1, 1, "formatDuration",
                       "a duration in ms as text such as 6h30m52s553ms")
SEDIMENT_EXPR_FUNCTION(kExprGetField, "getfield", 1, 1, "getField", "the value of a named field")

#undef SEDIMENT_EXPR_FUNCTION

}  // namespace sediment::query::functions
