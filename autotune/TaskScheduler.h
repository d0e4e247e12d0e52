#pragma once
/** \file Which task gets the next round: each task once, round robin, then the one whose
 * weighted latency the next trials are expected to cut most. */
#include "autotune/History.h"

namespace tessel::autotune {

// Null when every task's space is exhausted.
TaskState* pick_task(const Tasks& tasks);

}  // namespace tessel::autotune
