// GraphContext: a kept graph allocated again starts from the graph as built. ggml's scheduler
// rewrites a node's source that lives on another backend (a GPU step's inputs are the CPU's) to a
// copy in its own context, which the next split reuses for other tensors; unplace() puts the
// sources back and forgets where the tensors were placed.
#include <gtest/gtest.h>

#include <vector>

#include "core/backend.h"

namespace parlance {

TEST(GraphContext, UnplaceRestoresTheSourcesAsBuiltAndForgetsPlaces) {
    std::vector<uint8_t> meta;  // grown by the context to fit
    GraphContext gc(meta, 16);
    EXPECT_GE(meta.size(), ggml_tensor_overhead() * 1024);
    ggml_tensor* a = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    ggml_tensor* b = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    ggml_set_input(a);
    ggml_set_input(b);
    ggml_tensor* sum = ggml_add(gc.ctx, a, b);
    ggml_tensor* out = ggml_scale(gc.ctx, sum, 2.0f);
    ggml_build_forward_expand(gc.graph, out);
    gc.keep_sources();
    // What a split and an allocation leave behind.
    ggml_tensor* copy = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    sum->src[0] = copy;
    out->src[1] = copy;
    float storage[4];
    sum->data = storage;
    gc.unplace();
    EXPECT_EQ(sum->src[0], a);
    EXPECT_EQ(sum->src[1], b);
    EXPECT_EQ(out->src[0], sum);
    EXPECT_EQ(out->src[1], nullptr);
    EXPECT_EQ(sum->data, nullptr);
}

}  // namespace parlance
