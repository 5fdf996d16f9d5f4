/* Running an attnc bundle from plain C through the runtime's C API.
 *
 *   attnc compile 'variant=sdpa heads=4 d_k=32 mask=causal' -o out
 *   run_sdpa out/sdpa_*_reference.so
 *
 * Builds q, k, v and o for B=1, Tq=Tk=16 in BHSD layout (compact f32), runs the bundle and
 * prints a checksum of o. A fully masked row would print zeros, never NaN. */
#include <attnc/attnc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, H = 4, T = 16, D = 32 };

static DLTensor tensor4(float* data, int64_t* shape) {
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 4;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL; /* compact row-major */
  return t;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BUNDLE.so\n", argv[0]);
    return 2;
  }
  static float q[B * H * T * D], k[B * H * T * D], v[B * H * T * D], o[B * H * T * D];
  for (int i = 0; i < B * H * T * D; ++i) {
    q[i] = sinf(0.1f * (float)i);
    k[i] = cosf(0.07f * (float)i);
    v[i] = (float)(i % 7) - 3.0f;
  }
  int64_t shape[4] = {B, H, T, D};
  DLTensor tq = tensor4(q, shape), tk = tensor4(k, shape), tv = tensor4(v, shape),
           to = tensor4(o, shape);
  attnc_named_tensor tensors[] = {{"q", &tq}, {"k", &tk}, {"v", &tv}, {"o", &to}};

  attnc_error error;
  attnc_bundle* bundle = NULL;
  if (attnc_bundle_open(argv[1], &bundle, &error) != ATTNC_OK) {
    fprintf(stderr, "open: %s: %s\n", attnc_status_name(error.status), error.message);
    return 1;
  }
  attnc_run_options options = {1, NULL};
  attnc_status status = attnc_bundle_run(bundle, tensors, 4, &options, &error);
  attnc_bundle_close(bundle);
  if (status != ATTNC_OK) {
    fprintf(stderr, "run: %s: %s\n", attnc_status_name(status), error.message);
    return 1;
  }
  double checksum = 0;
  for (int i = 0; i < B * H * T * D; ++i)
    checksum += o[i];
  printf("o[0..3] = %.6f %.6f %.6f %.6f, checksum %.6f\n", o[0], o[1], o[2], o[3], checksum);
  return 0;
}
