/* Every internal header of the engine, for the C tests and benchmarks that
 * reach into several layers at once. Library files include only the
 * headers of the layers they use. */
#ifndef WLM_INTERNAL_H
#define WLM_INTERNAL_H

#include "base.h"
#include "ggml_types.h"
#include "quants.h"
#include "layouts.h"
#include "kernels.h"
#include "gguf.h"
#include "vocab.h"
#include "model.h"
#include "threads.h"
#include "attention.h"
#include "ctx.h"

#endif
