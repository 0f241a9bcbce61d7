// ggml's messages: the CUDA graph events ggml-cuda logs are counted by their wording in the pinned
// bundle (a rewording there would zero parlance_gpu_graphs_total silently; this names it).
#include <gtest/gtest.h>

#include "core/ggml_messages.h"

namespace parlance {

TEST(GgmlMessages, CudaGraphEventsAreCountedByTheirWording) {
    const GpuGraphCounts before = gpu_graph_counts();
    count_ggml_message("ggml_backend_cuda_graph_compute: CUDA graph warmup complete\n");
    count_ggml_message("ggml_backend_cuda_graph_compute: CUDA graph warmup reset\n");
    count_ggml_message("ggml_backend_cuda_graph_compute: CUDA graph warmup reset\n");
    count_ggml_message("ggml_cuda_graph_update_required: CUDA Graph id 42 reused\n");
    count_ggml_message("ggml_gallocr_reserve_n: reallocating CUDA0 buffer from size 0.00 MiB to 1.00 MiB\n");
    const GpuGraphCounts after = gpu_graph_counts();
    EXPECT_EQ(after.captured - before.captured, 1u);
    EXPECT_EQ(after.reset - before.reset, 2u);
    EXPECT_EQ(after.reused - before.reused, 1u);
}

}  // namespace parlance
