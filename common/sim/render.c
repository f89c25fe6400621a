/* render.c — pictures of a LIBERO env for people (common/sim/libero.h): the
 * agent-view camera rendered offscreen by MuJoCo in a headless EGL context
 * (Mesa's software renderer on a machine without a GPU), and PNG strips of
 * frames (libpng). Not used for training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <png.h>

#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/sim/sim_internal.h"

#ifndef EGL_PLATFORM_SURFACELESS_MESA
#define EGL_PLATFORM_SURFACELESS_MESA 0x31DD
#endif

struct rl_libero_renderer {
    EGLDisplay dpy;
    EGLContext ctx;
    const rl_libero_task *t;
    mjvScene scn;
    mjvCamera cam;
    mjvOption opt;
    mjrContext con;
    int w, h, scene_ok, con_ok;
    unsigned char *flip;
    mjData *shadow; /* poses of an env of another scene of the same task */
};

static int s_egl(rl_libero_renderer *r)
{
    PFNEGLGETPLATFORMDISPLAYEXTPROC get_display =
        (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
    r->dpy = get_display ? get_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL) : EGL_NO_DISPLAY;
    if (r->dpy == EGL_NO_DISPLAY)
        r->dpy = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    EGLint major, minor, n = 0;
    if (r->dpy == EGL_NO_DISPLAY || !eglInitialize(r->dpy, &major, &minor))
        return rl_error_set(RL_EUNSUPPORTED, "render: no EGL display (install libegl-mesa0 and libgl1-mesa-dri)");
    static const EGLint attrs[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8,
                                   EGL_BLUE_SIZE, 8, EGL_DEPTH_SIZE, 24, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                   EGL_NONE};
    EGLConfig cfg;
    if (!eglChooseConfig(r->dpy, attrs, &cfg, 1, &n) || n < 1)
        return rl_error_set(RL_EUNSUPPORTED, "render: EGL has no RGB8/depth24 OpenGL config");
    if (!eglBindAPI(EGL_OPENGL_API))
        return rl_error_set(RL_EUNSUPPORTED, "render: EGL cannot bind the OpenGL API");
    r->ctx = eglCreateContext(r->dpy, cfg, EGL_NO_CONTEXT, NULL);
    if (r->ctx == EGL_NO_CONTEXT || !eglMakeCurrent(r->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, r->ctx))
        return rl_error_set(RL_EUNSUPPORTED, "render: cannot make a surfaceless EGL OpenGL context current");
    return RL_OK;
}

typedef struct s_ctx_args {
    rl_libero_renderer *r;
} s_ctx_args;

static void s_make_ctx(void *arg)
{
    rl_libero_renderer *r = ((s_ctx_args *)arg)->r;
    mjv_defaultScene(&r->scn);
    mjv_makeScene(r->t->m, &r->scn, 2000);
    r->scene_ok = 1;
    mjr_defaultContext(&r->con);
    mjr_makeContext(r->t->m, &r->con, mjFONTSCALE_100);
    r->con_ok = 1;
    mjr_setBuffer(mjFB_OFFSCREEN, &r->con);
}

rl_libero_renderer *rl_libero_renderer_new(const rl_libero_task *t, const char *camera, int width, int height)
{
    s_mj_hooks_install();
    if (!t || !camera || width < 16 || height < 16 || width > 4096 || height > 4096) {
        rl_error_set(RL_EINVAL, "render: need a task, a camera and 16..4096 pixels a side, got %dx%d", width,
                     height);
        return NULL;
    }
    int cam = mj_name2id(t->m, mjOBJ_CAMERA, camera);
    if (cam < 0) {
        rl_error_set(RL_ENOTFOUND, "render: camera '%s' is not in task %d's scene", camera, t->index);
        return NULL;
    }
    if (width > t->m->vis.global.offwidth || height > t->m->vis.global.offheight) {
        rl_error_set(RL_ERANGE, "render: %dx%d is larger than the scene's offscreen buffer %dx%d", width, height,
                     t->m->vis.global.offwidth, t->m->vis.global.offheight);
        return NULL;
    }
    rl_libero_renderer *r = rl_zalloc(sizeof *r, NULL);
    if (!r)
        return NULL;
    r->t = t;
    r->w = width;
    r->h = height;
    r->flip = malloc((size_t)width * 3);
    if (!r->flip || s_egl(r)) {
        if (r->flip)
            rl_error_wrap(rl_error_code(), "task %d", t->index);
        else
            rl_error_set(RL_ENOMEM, "out of memory");
        rl_libero_renderer_free(r);
        return NULL;
    }
    mjv_defaultCamera(&r->cam);
    r->cam.type = mjCAMERA_FIXED;
    r->cam.fixedcamid = cam;
    mjv_defaultOption(&r->opt);
    /* what LIBERO's cameras show: visual geoms (group 1), no collision
     * geoms (group 0) and no sites */
    r->opt.geomgroup[0] = 0;
    for (int i = 0; i < mjNGROUP; i++)
        r->opt.sitegroup[i] = 0;
    s_ctx_args a = {r};
    if (s_mj_guard(s_make_ctx, &a) || r->con.currentBuffer != mjFB_OFFSCREEN) {
        rl_error_set(RL_EUNSUPPORTED, "render: MuJoCo cannot render offscreen here: %s", s_mj_last_error());
        rl_libero_renderer_free(r);
        return NULL;
    }
    return r;
}

void rl_libero_renderer_free(rl_libero_renderer *r)
{
    if (!r)
        return;
    if (r->con_ok)
        mjr_freeContext(&r->con);
    if (r->scene_ok)
        mjv_freeScene(&r->scn);
    if (r->dpy != EGL_NO_DISPLAY && r->dpy) {
        eglMakeCurrent(r->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        if (r->ctx != EGL_NO_CONTEXT && r->ctx)
            eglDestroyContext(r->dpy, r->ctx);
        eglTerminate(r->dpy);
    }
    if (r->shadow)
        mj_deleteData(r->shadow);
    free(r->flip);
    free(r);
}

typedef struct s_draw_args {
    rl_libero_renderer *r;
    const rl_libero_env *e;
    unsigned char *rgb;
} s_draw_args;

static void s_draw(void *arg)
{
    s_draw_args *a = arg;
    rl_libero_renderer *r = a->r;
    mjrRect vp = {0, 0, r->w, r->h};
    mjData *d = a->e->d;
    if (a->e->t->m != r->t->m) {
        /* an env of the physics-only scene: same joints, so its pose drawn
         * in the full scene */
        if (!r->shadow)
            r->shadow = mj_makeData(r->t->m);
        memcpy(r->shadow->qpos, d->qpos, sizeof(mjtNum) * (size_t)r->t->m->nq);
        mj_kinematics(r->t->m, r->shadow);
        mj_comPos(r->t->m, r->shadow);
        mj_camlight(r->t->m, r->shadow);
        d = r->shadow;
    }
    mjv_updateScene(r->t->m, d, &r->opt, NULL, &r->cam, mjCAT_ALL, &r->scn);
    mjr_render(vp, &r->scn, &r->con);
    mjr_readPixels(a->rgb, NULL, vp, &r->con);
}

int rl_libero_render(rl_libero_renderer *r, const rl_libero_env *e, unsigned char *rgb)
{
    if (!r || !e || !rgb)
        return rl_error_set(RL_EINVAL, "rl_libero_render: NULL argument");
    if (e->t->index != r->t->index || e->t->m->nq != r->t->m->nq)
        return rl_error_set(RL_EINVAL, "render: the env (task %d) is not of the renderer's task %d", e->t->index,
                            r->t->index);
    s_draw_args a = {r, e, rgb};
    if (s_mj_guard(s_draw, &a))
        return rl_error_set(RL_ESTATE, "render: MuJoCo: %s", s_mj_last_error());
    /* OpenGL rows run bottom-up: flip to top-down */
    size_t row = (size_t)r->w * 3;
    for (int y = 0; y < r->h / 2; y++) {
        unsigned char *a0 = rgb + (size_t)y * row, *b0 = rgb + (size_t)(r->h - 1 - y) * row;
        memcpy(r->flip, a0, row);
        memcpy(a0, b0, row);
        memcpy(b0, r->flip, row);
    }
    return RL_OK;
}

static void s_mem_write(png_structp png, png_bytep data, png_size_t len)
{
    rl_text_put(png_get_io_ptr(png), data, len);
}

static void s_mem_flush(png_structp png)
{
    (void)png;
}

int rl_png_encode_strip(const unsigned char *const *frames, int n, int width, int height, unsigned char **out,
                        size_t *len)
{
    if (!frames || !out || !len || n < 1 || width < 1 || height < 1 || (long long)n * width > 100000)
        return rl_error_set(RL_EINVAL, "png strip: bad arguments (%d frames of %dx%d)", n, width, height);
    rl_text b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    unsigned char *line = malloc((size_t)n * (size_t)width * 3);
    if (!png || !info || !line || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(line);
        free(b.buf);
        return rl_error_set(RL_ENOMEM, "png strip: libpng failed");
    }
    png_set_write_fn(png, &b, s_mem_write, s_mem_flush);
    png_set_IHDR(png, info, (png_uint_32)(width * n), (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) {
        for (int k = 0; k < n; k++)
            memcpy(line + (size_t)k * (size_t)width * 3, frames[k] + (size_t)y * (size_t)width * 3,
                   (size_t)width * 3);
        png_write_row(png, line);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(line);
    if (b.failed) {
        free(b.buf);
        return rl_error_set(RL_ENOMEM, "png strip: out of memory");
    }
    *out = (unsigned char *)b.buf;
    *len = b.len;
    return RL_OK;
}

int rl_png_write_strip(const char *path, const unsigned char *const *frames, int n, int width, int height)
{
    if (!path)
        return rl_error_set(RL_EINVAL, "png strip: bad arguments (%d frames of %dx%d)", n, width, height);
    unsigned char *png = NULL;
    size_t len = 0;
    int rc = rl_png_encode_strip(frames, n, width, height, &png, &len);
    if (!rc)
        rc = rl_file_write_atomic(path, png, len);
    free(png);
    return rc;
}
