// Placeholder: being written.
#include "query/transform.h"
