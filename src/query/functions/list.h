// The registration list: every function of the query language, one line each (see registry.h).
// A function's `const Function` is defined in its own file under functions/; All() returns them
// in this order.
#pragma once

#include "query/functions/registry.h"

// X(variable): the Function object; the comment names the file defining it.
#define SEDIMENT_QUERY_FUNCTIONS(X)                                          \
  X(kIn)         /* in.cc */                                                 \
  X(kWildcard)   /* wildcard.cc */                                           \
  X(kCount)      /* count.cc */                                              \
  X(kSum)        /* numeric_metrics.cc */                                    \
  X(kAvg)        /* numeric_metrics.cc */                                    \
  X(kMin)        /* numeric_metrics.cc */                                    \
  X(kMax)        /* numeric_metrics.cc */                                    \
  X(kPercentile) /* percentile.cc */                                         \
  X(kStdDev)     /* std_dev_range.cc */                                      \
  X(kRange)      /* std_dev_range.cc */                                      \
  X(kCollect)    /* collect.cc */                                            \
  X(kSelectFromMax) /* select_from.cc */                                     \
  X(kSelectFromMin)                                                          \
  X(kSelectLast)                                                             \
  X(kStats)      /* stats.cc */                                              \
  X(kGroupBy)    /* group_by.cc */                                           \
  X(kTimeChart)  /* time_chart.cc */                                         \
  X(kBucket)     /* time_chart.cc */                                         \
  X(kTop)        /* top.cc */                                                \
  X(kTable)      /* table.cc */                                              \
  X(kSelect)     /* select_drop.cc */                                        \
  X(kDrop)       /* select_drop.cc */                                        \
  X(kSort)       /* sort.cc */                                               \
  X(kHead)       /* head_tail.cc */                                          \
  X(kTail)       /* head_tail.cc */                                          \
  X(kRename)     /* rename.cc */                                             \
  X(kEval)       /* eval.cc */                                               \
  X(kRegex)      /* regex.cc */                                              \
  X(kParseJson)  /* parse_json.cc */                                         \
  X(kKvParse)    /* kv_parse.cc */                                           \
  X(kFormatTime) /* format_time.cc */                                        \
  X(kLower)      /* lower_length.cc */                                       \
  X(kLength)     /* lower_length.cc */                                       \
  X(kSplit)      /* split.cc */                                              \
  X(kFormat)     /* format.cc */                                             \
  X(kParseTimestamp) /* parse_timestamp.cc */                                \
  X(kFindTimestamp) /* parse_timestamp.cc */                                 \
  X(kTest)       /* test.cc */                                               \
  X(kReplace)    /* replace.cc */                                            \
  X(kDefault)    /* default.cc */                                            \
  X(kCoalesce)   /* coalesce.cc */                                           \
  X(kSplitString) /* split_string.cc */                                      \
  X(kConcatArray) /* concat_array.cc */                                      \
  X(kLowercase)  /* lowercase.cc */                                          \
  X(kUpper)      /* upper.cc */                                              \
  X(kUrlDecode)  /* decode.cc */                                             \
  X(kBase64Decode) /* decode.cc */                                           \
  X(kDropEvent)  /* drop_event.cc */                                         \
  X(kParseUrl)   /* parse_url_csv.cc */                                      \
  X(kParseCsv)                                                               \
  X(kParseCEF)   /* parse_cef.cc */                                          \
  X(kMathAbs) /* math.cc: math:* */                                          \
  X(kMathCeil)                                                               \
  X(kMathFloor)                                                              \
  X(kMathSqrt)                                                               \
  X(kMathCbrt)                                                               \
  X(kMathExp)                                                                \
  X(kMathExpm1)                                                              \
  X(kMathLog)                                                                \
  X(kMathLog10)                                                              \
  X(kMathLog2)                                                               \
  X(kMathLog1p)                                                              \
  X(kMathSin)                                                                \
  X(kMathCos)                                                                \
  X(kMathTan)                                                                \
  X(kMathArcsin)                                                             \
  X(kMathArccos)                                                             \
  X(kMathArctan)                                                             \
  X(kMathSinh)                                                               \
  X(kMathCosh)                                                               \
  X(kMathTanh)                                                               \
  X(kMathDeg2Rad)                                                            \
  X(kMathRad2Deg)                                                            \
  X(kMathPow)                                                                \
  X(kMathArctan2)                                                            \
  X(kTextLength) /* text.cc: text:* */                                       \
  X(kTextSubstring)                                                          \
  X(kTextContains)                                                           \
  X(kTextStartsWith)                                                         \
  X(kTextEndsWith)                                                           \
  X(kTimeYear) /* time.cc: time:* */                                         \
  X(kTimeMonth)                                                              \
  X(kTimeDayOfMonth)                                                         \
  X(kTimeHour)                                                               \
  X(kTimeMinute)                                                             \
  X(kTimeSecond)                                                             \
  X(kTimeMillisecond)                                                        \
  X(kTimeDayOfWeek)                                                          \
  X(kTimeDayOfWeekName)                                                      \
  X(kTimeMonthName)                                                          \
  X(kTimeDayOfYear)                                                          \
  X(kTimeWeekOfYear)                                                         \
  X(kExprLower)  /* expression_functions.cc: the functions of expressions */ \
  X(kExprUpper)                                                              \
  X(kExprLength)                                                             \
  X(kExprConcat)                                                             \
  X(kExprSubstr)                                                             \
  X(kExprTrim)                                                               \
  X(kExprRound)                                                              \
  X(kExprFloor)                                                              \
  X(kExprCeil)                                                               \
  X(kExprAbs)                                                                \
  X(kExprMin)                                                                \
  X(kExprMax)                                                                \
  X(kExprIf)                                                                 \
  X(kExprToString)                                                           \
  X(kExprToNumber)                                                           \
  X(kExprNow)                                                                \
  X(kExprFormatTime)

namespace sediment::query::functions {
#define SEDIMENT_QUERY_DECLARE_FUNCTION(f) extern const Function f;
SEDIMENT_QUERY_FUNCTIONS(SEDIMENT_QUERY_DECLARE_FUNCTION)
#undef SEDIMENT_QUERY_DECLARE_FUNCTION
}  // namespace sediment::query::functions
