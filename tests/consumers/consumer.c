/* A program built against an installed vlahybrid (pkg-config, CMake, or as a meson subproject):
 * one synthetic frame through the model folder given, one action out.
 *   consumer MODEL_DIR */
#include <stdio.h>
#include <stdlib.h>

#include <vlahybrid/vlahybrid.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer MODEL_DIR\n");
        return 2;
    }
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = argv[1];
    p.backends = "cpu_generic";
    vh_session *s;
    if (vh_session_create(&p, &s) != VH_OK) {
        fprintf(stderr, "consumer: %s\n", vh_last_error());
        return 1;
    }
    enum { W = 64, H = 48 };
    static uint8_t rgb[W * H * 3];
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 7);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb, f.width = W, f.height = H, f.stride = W * 3, f.instruction = "pick up the red block";
    uint64_t id;
    vh_action a;
    vh_action_init(&a);
    int ok = vh_submit_frame(s, &f, &id) == VH_OK && vh_poll_action(s, &a, 60000) == VH_OK && a.status == VH_OK;
    if (ok) printf("vlahybrid %s: frame %llu -> action [%+.4f ... %+.4f]\n", vh_version(), (unsigned long long)id,
                   a.values[0], a.values[a.action_dim - 1]);
    else fprintf(stderr, "consumer: %s\n", vh_session_last_error(s));
    vh_session_destroy(s);
    return ok ? 0 : 1;
}
