// Literals a regular expression's matches certainly contain, for the block filters and a fast
// substring search before RE2 runs (the executor's regex prefilter). Pure functions; the results
// are immutable and safe to share across threads.
//
// The analysis reads the RE2 source (RE2 syntax with RE2's default options: UTF-8, Perl classes,
// case-sensitive unless a (?i) flag says otherwise) and models only what it is sure of: any
// construct it does not model exactly counts as "matches anything", so the result is always a
// necessary condition for a match, never a sufficient one.
//
// Case: every literal is kept ASCII-lower-cased and is meant to be found ASCII-case-insensitively
// (as CiSearcher and SegmentReader::BlockMayContainAll do); other bytes match exactly. Under (?i)
// RE2 folds case by Unicode rules, where 'k' also matches U+212A (Kelvin sign) and 's' U+017F
// (long s), and non-ASCII letters match their other cases with different bytes: such characters
// end a literal instead of joining it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "query/search.h"

namespace re2 {
class RE2;
}

namespace sediment::query {

// What every match contains: for each clause, at least one of its literals (non-empty,
// ASCII-lower-cased, no literal of a clause contains another). No clauses: nothing is certain.
struct RegexLiterals {
  std::vector<std::vector<std::string>> clauses;
};

// The literals of the RE2 pattern `pattern`, taken as compiled with RE2's default options.
RegexLiterals AnalyzeRegexPattern(std::string_view pattern);

// The literals of `re`; none when its options are not the defaults the analysis models (other
// than logging).
RegexLiterals AnalyzeRegex(const re2::RE2& re);

// Lower-cased terms every match contains, for SegmentReader::BlockMayContainAll: the literal of
// each one-literal clause, and of a longer clause the literal that every other literal of it
// contains (if any).
std::vector<std::string> RequiredRegexTerms(const RegexLiterals& lits);

// The most selective clause (longest shortest literal, then fewest literals; at most
// kMaxPrefilterLiterals literals, each at least kMinPrefilterLiteral bytes) as searchers: text
// containing none of them cannot match. Empty when there is no clause.
constexpr size_t kMaxPrefilterLiterals = 4;
// Shorter literals are too common to be worth a search of their own (and the block filters
// ignore them).
constexpr size_t kMinPrefilterLiteral = 3;
std::vector<CiSearcher> RegexPrefilter(const RegexLiterals& lits);

// Whether `text` contains one of `prefilter`'s literals; true when `prefilter` is empty.
bool PrefilterAdmits(const std::vector<CiSearcher>& prefilter, std::string_view text);

}  // namespace sediment::query
