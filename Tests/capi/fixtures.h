/*
 * fixtures.h: the names, sizes and pixel formulas of the test fixtures, shared by
 * mkfixtures.c (which writes them) and the tests (which check decoded pixels against
 * the same formulas).
 */
#ifndef PXL_TEST_FIXTURES_H
#define PXL_TEST_FIXTURES_H

#define FIXTURE_GRADIENT_JPG "gradient.jpg"  /* 640x480, R rises left to right, G top to bottom */
#define FIXTURE_ORIENTED_JPG "oriented6.jpg" /* the gradient, EXIF orientation 6 (rotate 90 CW) */
#define FIXTURE_GRAY_JPG "gray8.jpg"         /* the gradient as a grayscale JPEG, EXIF orientation 8 */
#define FIXTURE_NOISE_JPG "noise.jpg"        /* large and incompressible: slow through /slow/ */
#define FIXTURE_MEDIUM_JPG "medium.jpg"      /* noise again, about 3 s through /slow/ */
#define FIXTURE_PROGRESSIVE_JPG "progressive.jpg" /* progressive (libjpeg's 10-scan script):
                                                     shading, discs and grain; a few s via /slow/ */
#define FIXTURE_PROGRESSIVE444_JPG "progressive444.jpg" /* the same scene, 4:4:4 */
#define FIXTURE_PROGRESSIVE_W 480
#define FIXTURE_PROGRESSIVE_H 360
#define FIXTURE_ALPHA_PNG "alpha.png"        /* 300x200 RGBA, alpha rises left to right */
#define FIXTURE_ALPHA_WEBP "alpha.webp"      /* alpha.png's pixels as lossless WebP */
#define FIXTURE_ORIENTED_WEBP "oriented6.webp" /* the gradient as lossless WebP in a VP8X
                                                  container with EXIF orientation 6 */
#define FIXTURE_PHOTO_WEBP "photo.webp"      /* a 2400x1600 lossy WebP of a scene (smooth shading,
                                                discs, grain): tens of ms to decode */
#define FIXTURE_PHOTO_WEBP_W 2400
#define FIXTURE_PHOTO_WEBP_H 1600
#define FIXTURE_ANIM_WEBP "anim.webp"        /* a 3-frame animation of the alpha pixels: frame 1
                                                is alpha.png's, the others differ */
#define FIXTURE_CORRUPT_JPG "corrupt.jpg"    /* JPEG magic and tables, no frame: libjpeg errors */
#define FIXTURE_NOT_AN_IMAGE "not-an-image.jpg" /* HTML under an image name */

#define FIXTURE_GRADIENT_W 640
#define FIXTURE_GRADIENT_H 480
#define FIXTURE_GRADIENT_B 64
#define FIXTURE_NOISE_W 640 /* about 270 KB: 13 s at /slow/'s 20 KB/s */
#define FIXTURE_NOISE_H 480
/* nginx's limit_rate lets the first second's worth (20 KB) out at once, so a /slow/ body
 * must be well over 20 KB to be slow at all. */
#define FIXTURE_MEDIUM_W 320 /* about 70 KB */
#define FIXTURE_MEDIUM_H 240
#define FIXTURE_ALPHA_W 300
#define FIXTURE_ALPHA_H 200

static inline int fixture_gradient_r(int x) { return x * 255 / (FIXTURE_GRADIENT_W - 1); }
static inline int fixture_gradient_g(int y) { return y * 255 / (FIXTURE_GRADIENT_H - 1); }

/* Straight (non-premultiplied) RGBA of alpha.png at (x, y). Column 0 is fully
 * transparent, the last column opaque. */
static inline void fixture_alpha_pixel(int x, int y, unsigned char rgba[4]) {
  rgba[0] = (unsigned char)(x * 255 / (FIXTURE_ALPHA_W - 1));
  rgba[1] = (unsigned char)(y * 255 / (FIXTURE_ALPHA_H - 1));
  rgba[2] = 200;
  rgba[3] = (unsigned char)(x * 255 / (FIXTURE_ALPHA_W - 1));
}

#endif
