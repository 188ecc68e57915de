// The public headers compile as C++ (-std=c++11 -Wall -Wextra -Werror) and link from C++: the
// extern "C" blocks and the inline helpers work there too.
#include <vlahybrid/backend.h>
#include <vlahybrid/vlahybrid.h>

#include <cstring>

int main()
{
    vh_session_params params;
    vh_session_params_init(&params);
    vh_action action;
    vh_action_init(&action);
    return params.struct_size == sizeof params && action.struct_size == sizeof action &&
                   std::strcmp(vh_status_string(VH_OK), "") != 0
               ? 0
               : 1;
}
