/* The public headers compile as strict C99 (-std=c99 -pedantic -Werror; the library itself is C11):
 * users may build against them with an older C compiler. Running it calls the inline helpers. */
#include <vlahybrid/backend.h>
#include <vlahybrid/vlahybrid.h>

int main(void)
{
    vh_session_params params;
    vh_frame frame;
    vh_action action;
    vh_session_info info;
    vh_session_params_init(&params);
    vh_frame_init(&frame);
    vh_action_init(&action);
    vh_session_info_init(&info);
    return params.struct_size == sizeof params && frame.struct_size == sizeof frame &&
                   action.struct_size == sizeof action && info.struct_size == sizeof info &&
                   vh_version_number() == VH_VERSION_NUMBER
               ? 0
               : 1;
}
