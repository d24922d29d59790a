"""WebSocket routes, collected from the apps that serve them."""

websocket_urlpatterns = []
