// What a packed vision-language batch gives the frozen decoder: every image decoded from its
// shard bytes and preprocessed as at prep time (its grid must come out the same), the vision
// tower run once over all of them without gradients (it is frozen, like the decoder), the image
// features placed at the image tokens, and the multimodal rotary positions of each document
// computed from its own tokens and grids (positions restart at every document, as the 1-D ones
// do). Text documents in the batch get plain positions on all three axes.
#pragma once

#include "data/packed_dataset.h"
#include "model/decoder.h"
#include "model/vision/image_processor.h"

namespace retain {

MultimodalInputs packed_multimodal_inputs(const Decoder& model, const PackedBatch& batch,
                                          const ImageProcessorConfig& processor);

}  // namespace retain
