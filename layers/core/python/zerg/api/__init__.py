"""The Jarvis HTTP API: Powertools ``APIGatewayHttpResolver``, one Router per domain."""
