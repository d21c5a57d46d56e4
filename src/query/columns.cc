#include "query/columns.h"

#include <algorithm>

namespace sediment::query {
namespace {

using K = FilterNode::Kind;
using S = Stage::Kind;

class Needs {
 public:
  void Field(const std::string& name) {
    if (name.empty() || name[0] == '#') return;
    if (name == "@rawstring") {
      sel_.raw = true;
      return;
    }
    if (name == "@ingesttimestamp") {
      sel_.ingest = true;
      return;
    }
    if (name == "@timestamp" || name == "@id") {
      Order();
      return;
    }
    sel_.fields.push_back(name);
  }
  void Raw() { sel_.raw = true; }
  void All() { sel_.all = true; }
  // @timestamp, @id or the records' order (Record::key) may be read.
  void Order() { sel_.order = true; }

  void Filter(const FilterNode& f) {
    switch (f.kind) {
      case K::kText:
      case K::kTextGlob:
      case K::kRawRegex:
        Raw();
        break;
      case K::kFieldEq:
      case K::kFieldGlob:
      case K::kFieldRegex:
      case K::kFieldCmp:
        Field(f.field);
        break;
      default:
        break;
    }
    for (const FilterPtr& c : f.children) Filter(*c);
  }

  void Expression(const Expr& e) {
    if (e.kind == Expr::Kind::kField) Field(e.text);
    if (e.kind == Expr::Kind::kCall && e.text == "getfield") All();  // a name known at run time
    if (e.kind == Expr::Kind::kStage) Transform(*e.stage);
    for (const ExprPtr& a : e.args) Expression(*a);
  }

  void Transform(const Stage& st) {
    switch (st.kind) {
      case S::kFilter:
        Filter(*st.filter);
        return;
      case S::kEval:
        for (const auto& [target, expr] : st.assignments) {
          Field(target);
          Expression(*expr);
        }
        return;
      case S::kRegex:
      case S::kParseJson:
        Field(st.field.empty() ? std::string("@rawstring") : st.field);
        return;
      case S::kKvParse:
        Field(st.field.empty() ? std::string("@rawstring") : st.field);
        // Without override, which fields already exist decides what is set.
        if (!st.override_fields) All();
        return;
      case S::kCase:
        for (const CaseBranch& b : st.branches) {
          Filter(*b.condition);
          for (const Stage& s : b.stages) Transform(s);
        }
        return;
      case S::kFormatTime:
        Field(st.field.empty() ? std::string("@timestamp") : st.field);
        Field(st.as);
        return;
      case S::kLower:
      case S::kLength:
        Field(st.field);
        Field(st.as);
        return;
      case S::kRename:
        for (const auto& [from, to] : st.renames) {
          Field(from);
          Field(to);
        }
        return;
      case S::kSelect:
        for (const std::string& f : st.fields) Field(f);
        return;
      case S::kDrop:
        return;
      case S::kFunction:
        if (st.function_reads_all) All();
        for (const std::string& f : st.function_fields) Field(f);
        // A function may keep or compare the record's order key.
        Order();
        return;
      default:
        // kSplit reads every field under a prefix; anything new is read whole.
        All();
        return;
    }
  }

  void Collector(const Stage& st) {
    switch (st.kind) {
      case S::kTable:
        for (const std::string& f : st.fields) Field(f);
        Order();  // the newest rows, by the records' order
        return;
      case S::kAggregate:
        if (st.grouping == Stage::Grouping::kBucket) Order();  // buckets by @timestamp
        for (const std::string& f : st.fields) Field(f);
        for (const Metric& m : st.metrics) {
          if (m.kind == Metric::Kind::kSubquery) All();  // its stages may read anything
          // selectLast keeps the newest value; selectFromMax/Min break ties by the order.
          if (m.kind == Metric::Kind::kSelectMax || m.kind == Metric::Kind::kSelectMin ||
              m.kind == Metric::Kind::kSelectLast)
            Order();
          Field(m.field);
          for (const std::string& f : m.select_fields) Field(f);
        }
        Field(st.top_sum);
        return;
      default:
        // head/tail/sort keep whole events.
        All();
        return;
    }
  }

  ColumnSelection Done() {
    if (sel_.all) return ColumnSelection{};
    std::sort(sel_.fields.begin(), sel_.fields.end());
    sel_.fields.erase(std::unique(sel_.fields.begin(), sel_.fields.end()), sel_.fields.end());
    return std::move(sel_);
  }

 private:
  ColumnSelection sel_{.all = false, .raw = false, .ingest = false, .order = false, .fields = {}};
};

}  // namespace

ColumnSelection ScanColumns(const CompiledQuery& query) {
  Needs needs;
  needs.Filter(*query.filter);
  size_t s = 0;
  for (; s < query.stages.size() && query.stages[s].IsTransform(); ++s) {
    needs.Transform(query.stages[s]);
  }
  if (s < query.stages.size()) {
    needs.Collector(query.stages[s]);
  } else {
    needs.All();  // the events themselves are the result
  }
  return needs.Done();
}

}  // namespace sediment::query
