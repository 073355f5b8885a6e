#include "internal.h"
void stall_init(void) {}
void stall_poll(void) {}
