"""What every domain shares: problem details, JSON decoding, client addresses and rate limits,
security headers, Swagger UI, hashed secrets, HTML templates."""
