// A kept graph (Backend::alloc_graph(GraphContext&)): allocated once while no other allocation
// comes between, and allocated again from the graph as built when one does. ggml's scheduler
// rewrites a node's source that lives on another backend (a GPU step's inputs are the CPU's) to a
// copy in its own context, which the next split reuses for other tensors; the kept graph's sources
// go back and its tensors' old places are forgotten before it is placed again.
#include <gtest/gtest.h>

#include <vector>

#include "core/backend.h"

namespace parlance {

TEST(GraphContext, AKeptGraphIsPlacedAgainOnlyAfterAnotherAllocationAndAsBuilt) {
    Backend backend(BackendOptions{"cpu", 1, true, false});
    std::vector<uint8_t> meta;  // grown by the context to fit
    GraphContext gc(meta, 16);
    EXPECT_GE(meta.size(), ggml_tensor_overhead() * 1024);
    ggml_tensor* a = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    ggml_tensor* b = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    ggml_set_input(a);
    ggml_set_input(b);
    ggml_tensor* sum = ggml_add(gc.ctx, a, b);
    ggml_tensor* out = ggml_scale(gc.ctx, sum, 2.0f);
    ggml_set_output(out);
    ggml_build_forward_expand(gc.graph, out);
    const auto run = [&](float x, float y) {
        backend.alloc_graph(gc);
        const std::vector<float> va(4, x), vb(4, y);
        ggml_backend_tensor_set(a, va.data(), 0, sizeof(float) * 4);
        ggml_backend_tensor_set(b, vb.data(), 0, sizeof(float) * 4);
        backend.compute(gc.graph);
        std::vector<float> r(4);
        ggml_backend_tensor_get(out, r.data(), 0, sizeof(float) * 4);
        return r[3];
    };
    EXPECT_EQ(run(1, 2), 6.0f);
    const uint64_t placed = backend.allocation();
    EXPECT_EQ(run(3, 4), 14.0f);
    EXPECT_EQ(backend.allocation(), placed) << "allocated again with no other allocation between";

    // What another graph's split and allocation leave behind.
    std::vector<uint8_t> other_meta;
    GraphContext other(other_meta, 16);
    ggml_tensor* copy = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F32, 4);
    sum->src[0] = copy;
    out->src[1] = copy;
    ggml_build_forward_expand(other.graph, ggml_scale(other.ctx, ggml_new_tensor_1d(other.ctx, GGML_TYPE_F32, 64), 1));
    backend.alloc_graph(other.graph);
    EXPECT_EQ(run(5, 6), 22.0f);
    EXPECT_GT(backend.allocation(), placed + 1) << "not allocated again after another allocation";
    EXPECT_EQ(sum->src[0], a);
    EXPECT_EQ(sum->src[1], b);
    EXPECT_EQ(out->src[0], sum);
    EXPECT_EQ(out->src[1], nullptr);
}

}  // namespace parlance
