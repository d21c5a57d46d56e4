// The registration list: every function of the query language, one line each (see registry.h).
// A function's `const Function` is defined in its own file under functions/; All() returns them
// in this order.
#pragma once

#include "query/functions/registry.h"

// X(variable): the Function object; the comment names the file defining it. Issue 17's entries
// (without comments, so that the list keeps its formatting) are defined in: stdDev/range
// numeric_metrics.cc, collect collect.cc, selectFromMax/Min/selectLast select_from.cc, format
// format.cc, parseTimestamp/findTimestamp parse_timestamp.cc, test test.cc, replace replace.cc,
// default default.cc, coalesce coalesce.cc, splitString split_string.cc, concatArray
// concat_array.cc, lowercase lowercase.cc, upper upper.cc, urlDecode/base64Decode decode.cc,
// dropEvent drop_event.cc, parseUrl/parseCsv parse_url_csv.cc, parseCEF parse_cef.cc, kMath*
// math.cc, kText* text.cc, kTime* time.cc, sankey sankey.cc, formatDuration format_duration.cc,
// eventSize event_size.cc, subnet subnet.cc, tokenHash token_hash.cc, kCrypto* crypto.cc,
// arrayExists array_exists.cc, round round.cc, session
// session.cc, sample sample.cc,
// eventFieldCount event_field_count.cc, setTimeInterval
// set_time_interval.cc, kBitfield* bitfield.cc, geohash geohash.cc,
// math:spherical2cartesian spherical.cc, cidr cidr.cc,
// json:prettyPrint json_pretty_print.cc, xml:prettyPrint xml_pretty_print.cc, fieldstats/fieldset
// field_stats.cc, array:eval/objectArray:eval/objectArray:exists array_eval.cc, copyEvent
// copy_event.cc, hashRewrite/hashMatch hash_match.cc, eventInternals event_internals.cc,
// selfJoinFilter/selfJoin self_join.cc, setField set_field.cc, ipLocation
// ip_location.cc, asn asn.cc, worldMap world_map.cc.
#define SEDIMENT_QUERY_FUNCTIONS(X)                                           \
  X(kIn)          /* in.cc */                                                 \
  X(kWildcard)    /* wildcard.cc */                                           \
  X(kCount)       /* count.cc */                                              \
  X(kSum)         /* numeric_metrics.cc */                                    \
  X(kAvg)         /* numeric_metrics.cc */                                    \
  X(kMin)         /* numeric_metrics.cc */                                    \
  X(kMax)         /* numeric_metrics.cc */                                    \
  X(kPercentile)  /* percentile.cc */                                         \
  X(kStats)       /* stats.cc */                                              \
  X(kGroupBy)     /* group_by.cc */                                           \
  X(kTimeChart)   /* time_chart.cc */                                         \
  X(kBucket)      /* time_chart.cc */                                         \
  X(kTop)         /* top.cc */                                                \
  X(kTable)       /* table.cc */                                              \
  X(kSelect)      /* select_drop.cc */                                        \
  X(kDrop)        /* select_drop.cc */                                        \
  X(kSort)        /* sort.cc */                                               \
  X(kHead)        /* head_tail.cc */                                          \
  X(kTail)        /* head_tail.cc */                                          \
  X(kRename)      /* rename.cc */                                             \
  X(kEval)        /* eval.cc */                                               \
  X(kRegex)       /* regex.cc */                                              \
  X(kParseJson)   /* parse_json.cc */                                         \
  X(kKvParse)     /* kv_parse.cc */                                           \
  X(kFormatTime)  /* format_time.cc */                                        \
  X(kLower)       /* lower_length.cc */                                       \
  X(kLength)      /* lower_length.cc */                                       \
  X(kSplit)       /* split.cc */                                              \
  X(kMatch)       /* match.cc */                                              \
  X(kDefineTable) /* define_table.cc */                                       \
  X(kJoin)        /* define_table.cc */                                       \
  X(kExprLower)   /* expression_functions.cc: the functions of expressions */ \
  X(kExprUpper)                                                               \
  X(kExprLength)                                                              \
  X(kExprConcat)                                                              \
  X(kExprSubstr)                                                              \
  X(kExprTrim)                                                                \
  X(kExprRound)                                                               \
  X(kExprFloor)                                                               \
  X(kExprCeil)                                                                \
  X(kExprAbs)                                                                 \
  X(kExprMin)                                                                 \
  X(kExprMax)                                                                 \
  X(kExprIf)                                                                  \
  X(kExprToString)                                                            \
  X(kExprToNumber)                                                            \
  X(kExprNow)                                                                 \
  X(kExprFormatTime)                                                          \
  X(kExprDuration)                                                            \
  X(kExprGetField)                                                            \
  X(kExprFormatDuration)                                                      \
  X(kExprStart)                                                               \
  X(kExprEnd)                                                                 \
  X(kStdDev)                                                                  \
  X(kRange)                                                                   \
  X(kCallFunction) /* call_function.cc */                                     \
  X(kCollect)                                                                 \
  X(kSelectFromMax)                                                           \
  X(kSelectFromMin)                                                           \
  X(kSelectLast)                                                              \
  X(kFormat)                                                                  \
  X(kParseTimestamp)                                                          \
  X(kFindTimestamp)                                                           \
  X(kTest)                                                                    \
  X(kSetField)                                                                \
  X(kReplace)                                                                 \
  X(kDefault)                                                                 \
  X(kCoalesce)                                                                \
  X(kSplitString)                                                             \
  X(kConcatArray)                                                             \
  X(kLowercase)                                                               \
  X(kUpper)                                                                   \
  X(kUrlDecode)                                                               \
  X(kBase64Decode)                                                            \
  X(kDropEvent)                                                               \
  X(kParseUrl)                                                                \
  X(kParseCsv)                                                                \
  X(kParseCEF)                                                                \
  X(kMathAbs)                                                                 \
  X(kMathCeil)                                                                \
  X(kMathFloor)                                                               \
  X(kMathSqrt)                                                                \
  X(kMathCbrt)                                                                \
  X(kMathExp)                                                                 \
  X(kMathExpm1)                                                               \
  X(kMathLog)                                                                 \
  X(kMathLog10)                                                               \
  X(kMathLog2)                                                                \
  X(kMathLog1p)                                                               \
  X(kMathSin)                                                                 \
  X(kMathCos)                                                                 \
  X(kMathTan)                                                                 \
  X(kMathArcsin)                                                              \
  X(kMathArccos)                                                              \
  X(kMathArctan)                                                              \
  X(kMathSinh)                                                                \
  X(kMathCosh)                                                                \
  X(kMathTanh)                                                                \
  X(kMathDeg2Rad)                                                             \
  X(kMathRad2Deg)                                                             \
  X(kMathPow)                                                                 \
  X(kMathArctan2)                                                             \
  X(kArrayContains)                                                           \
  X(kArrayRegex)                                                              \
  X(kArrayLength)                                                             \
  X(kArrayAppend)                                                             \
  X(kArrayDrop)                                                               \
  X(kArrayDedup)                                                              \
  X(kArrayRename)                                                             \
  X(kArrayReduceRow)                                                          \
  X(kArrayUnion)                                                              \
  X(kArrayIntersection)                                                       \
  X(kArrayReduceAll)                                                          \
  X(kHash)                                                                    \
  X(kParseUri)                                                                \
  X(kCreateEvents)                                                            \
  X(kReadFile)                                                                \
  X(kNeighbor)                                                                \
  X(kAccumulate)                                                              \
  X(kSlidingTimeWindow)                                                       \
  X(kTranspose)                                                               \
  X(kIocLookup)                                                               \
  X(kIpLocation)                                                              \
  X(kWorldMap)                                                                \
  X(kAsn)                                                                     \
  X(kTextLength)                                                              \
  X(kTextSubstring)                                                           \
  X(kTextPositionOf)                                                          \
  X(kTextContains)                                                            \
  X(kTextStartsWith)                                                          \
  X(kTextEndsWith)                                                            \
  X(kTimeYear)                                                                \
  X(kTimeMonth)                                                               \
  X(kTimeDayOfMonth)                                                          \
  X(kTimeHour)                                                                \
  X(kTimeMinute)                                                              \
  X(kTimeSecond)                                                              \
  X(kTimeMillisecond)                                                         \
  X(kTimeDayOfWeek)                                                           \
  X(kTimeDayOfWeekName)                                                       \
  X(kTimeMonthName)                                                           \
  X(kTimeDayOfYear)                                                           \
  X(kTimeWeekOfYear)                                                          \
  X(kSankey)                                                                  \
  X(kFormatDuration)                                                          \
  X(kEventSize)                                                               \
  X(kSubnet)                                                                  \
  X(kTokenHash)                                                               \
  X(kCryptoMd5)                                                               \
  X(kCryptoSha1)                                                              \
  X(kCryptoSha256)                                                            \
  X(kArrayExists)                                                             \
  X(kRound)                                                                   \
  X(kSession)                                                                 \
  X(kSample)                                                                  \
  X(kEventFieldCount)                                                         \
  X(kSetTimeInterval)                                                         \
  X(kBitfieldExtractFlags)                                                    \
  X(kBitfieldExtractFlagsAsString)                                            \
  X(kBitfieldExtractFlagsAsArray)                                             \
  X(kGeohash)                                                                 \
  X(kMathSpherical2Cartesian)                                                 \
  X(kCidr)                                                                    \
  X(kJsonPrettyPrint)                                                         \
  X(kXmlPrettyPrint)                                                          \
  X(kParseXml)          /* parse_xml.cc */                                    \
  X(kUnitConvert)       /* unit_convert.cc */                                 \
  X(kParseHexString)    /* decode.cc */                                       \
  X(kBase64Encode)      /* encode.cc */                                       \
  X(kUrlEncode)         /* encode.cc */                                       \
  X(kParseInt)          /* parse_int.cc */                                    \
  X(kShannonEntropy)    /* shannon_entropy.cc */                              \
  X(kStripAnsiCodes)    /* strip_ansi_codes.cc */                             \
  X(kParseFixedWidth)   /* parse_fixed_width.cc */                            \
  X(kMathMod)           /* math.cc */                                         \
  X(kSlidingWindow)     /* sequence.cc */                                     \
  X(kConcat)            /* concat.cc */                                       \
  X(kGeographyDistance) /* geography_distance.cc */                           \
  X(kCommunityId)       /* community_id.cc */                                 \
  X(kWriteJson)         /* write_json.cc */                                   \
  X(kArrayFilter)       /* array_eval.cc */                                   \
  X(kParseLEEF)         /* parse_leef.cc */                                   \
  X(kFieldstats)                                                              \
  X(kFieldset)                                                                \
  X(kArrayEval)                                                               \
  X(kObjectArrayEval)                                                         \
  X(kObjectArrayExists)                                                       \
  X(kCopyEvent)                                                               \
  X(kHashRewrite)                                                             \
  X(kHashMatch)                                                               \
  X(kEventInternals)                                                          \
  X(kSelfJoinFilter)                                                          \
  X(kSelfJoin)                                                                \
  X(kCorrelate) /* correlate.cc */                                            \
  X(kSeries)    /* series.cc */                                               \
  X(kWindow)    /* window.cc */

namespace sediment::query::functions {
#define SEDIMENT_QUERY_DECLARE_FUNCTION(f) extern const Function f;
SEDIMENT_QUERY_FUNCTIONS(SEDIMENT_QUERY_DECLARE_FUNCTION)
#undef SEDIMENT_QUERY_DECLARE_FUNCTION
}  // namespace sediment::query::functions
