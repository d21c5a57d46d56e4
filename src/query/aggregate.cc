// Placeholder: being written.
#include "query/aggregate.h"
