#pragma once
/** \file Human-readable text of expressions and loop programs. */
#include <string>

#include "ir/IR.h"

namespace tessel {
std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
// The C operator of a binary node (" + ", "*", " < ", ...), or nullptr for min/max.
const char* binary_symbol(NodeKind k);
}  // namespace tessel
