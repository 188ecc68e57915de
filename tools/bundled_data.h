/* Where the tools find the bundled tiny model and demo frames, at run time from where the program
 * is (no absolute path is compiled in, so an installed tree can be moved):
 *   - installed: <the program's folder>/VH_BINDIR_TO_DATADIR/models/openvla-tiny and .../frames
 *     (VH_BINDIR_TO_DATADIR is datadir/vlahybrid relative to bindir, "../share/vlahybrid");
 *   - build tree: the marker file VH_TOOLS_BUILD_TREE_MARKER that tools/meson.build writes beside
 *     the built programs names the source tree's folders ("model=...", "frames=..."; never
 *     installed).
 * The installed copy wins when both exist. */
#ifndef VH_TOOLS_BUNDLED_DATA_H
#define VH_TOOLS_BUNDLED_DATA_H

#define VH_TOOLS_BUILD_TREE_MARKER "vlahybrid-build-tree-data"

/* The bundled model's and frames' folders; when neither copy is found, where the installed copy
 * would be (so a message names it). Computed once; thread-safe; never NULL. */
const char *vh_bundled_model_dir(void);
const char *vh_bundled_frames_dir(void);

#define VH_BUNDLED_MODEL_DIR vh_bundled_model_dir()
#define VH_BUNDLED_FRAMES_DIR vh_bundled_frames_dir()

#endif
