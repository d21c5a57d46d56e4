// Internal representation of a compiled query (shared by the parser, the evaluator, the executor
// and the tests). Immutable after Compile; safe to share across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/event.h"
#include "query/search.h"

namespace re2 {
class RE2;
}

namespace sediment::query {

struct FilterNode {
  enum class Kind {
    kTrue,      // matches every event
    kFalse,     // matches no event
    kAnd,       // children[0] AND children[1]
    kOr,        // children[0] OR children[1]
    kNot,       // NOT children[0]
    kText,      // case-insensitive substring `text` (lower-cased) of @rawstring
    kTextGlob,  // free-text pattern with '*' (`text`, lower-cased): `pieces` in order in @rawstring
    kRawRegex,  // /re/ searched in @rawstring
    kFieldEq,   // field == text (whole value, case-sensitive)
    kFieldGlob,   // field matches the anchored '*' glob `text` (case-sensitive)
    kFieldRegex,  // `re` found in the field's value
  };
  Kind kind = Kind::kTrue;
  std::vector<std::shared_ptr<const FilterNode>> children;
  std::string field;  // field comparisons
  std::string text;   // literal / glob pattern / regex source
  std::shared_ptr<const re2::RE2> re;
  std::shared_ptr<const CiSearcher> searcher;  // kText
  // kTextGlob: the non-empty pieces between '*' (lower-cased), at least one.
  std::vector<CiSearcher> pieces;
  size_t position = 0;  // byte offset of the construct in the query text
};
using FilterPtr = std::shared_ptr<const FilterNode>;

struct Stage {
  enum class Kind { kCount, kHead, kTail, kSort, kTable, kGroupBy };
  Kind kind = Kind::kCount;
  std::vector<std::string> fields;  // sort keys / table columns / group keys
  int64_t limit = 200;
  bool descending = true;  // sort only
  size_t position = 0;
  bool IsAggregate() const { return kind != Kind::kHead && kind != Kind::kTail; }
};

class CompiledQuery {
 public:
  std::string text;
  FilterPtr filter;  // never null (kTrue for an empty filter)
  std::vector<Stage> stages;
  bool is_aggregate = false;  // some stage is an aggregate
};

// Lower-cased literals that every event matching `filter` contains (case-insensitively) in its
// @rawstring or a field value: taken from the AND-spine (free text, phrases, field literals,
// wildcard pieces); an OR contributes only terms implied by both of its sides.
std::vector<std::string> RequiredTerms(const FilterNode& filter);

// `filter` with every comparison on a datasource tag (#repo, #type, ...) replaced by its constant
// outcome for `ds`, and constants folded. Shares unchanged subtrees.
FilterPtr Specialize(const FilterPtr& filter, const Datasource& ds);

// S-expression rendering for tests and debugging, e.g. (and (text "foo") (eq "a" "b")).
std::string DebugString(const FilterNode& filter);

// Whether `value` matches the anchored glob `pattern` ('*' = any run of bytes), case-sensitive.
bool GlobMatch(std::string_view pattern, std::string_view value);

}  // namespace sediment::query
