/* A plain C program that calls the kernel Tessel exported: it needs only the library and
 * the generated header, not Tessel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "blur3x3.h"

int main(void) {
  enum { H = 1024, W = 1024 };
  float* in = aligned_alloc(64, sizeof(float) * H * W);
  float* out = aligned_alloc(64, sizeof(float) * (H - 2) * (W - 2));
  for (int i = 0; i < H * W; ++i) in[i] = (float)((i * 7919) % 1000) / 1000.0f;
  void* args[] = {in, out};
  if (blur3x3(args) != 0) {
    fprintf(stderr, "caller: blur3x3 failed\n");
    return 1;
  }
  double err = 0;
  for (int y = 0; y < H - 2; ++y)
    for (int x = 0; x < W - 2; ++x) {
      double s = 0;
      for (int dy = 0; dy < 3; ++dy)
        for (int dx = 0; dx < 3; ++dx) s += in[(y + dy) * W + x + dx];
      double e = fabs(s / 9 - out[y * (W - 2) + x]);
      if (e > err) err = e;
    }
  printf("caller: blur3x3 from the exported library, max error %.2g\n", err);
  free(in);
  free(out);
  return err < 1e-5 ? 0 : 1;
}
